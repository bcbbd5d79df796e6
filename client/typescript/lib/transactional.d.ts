/** The part of a node-postgres client the helper uses. */
export interface SqlQueryable {
    query(text: string, values?: unknown[]): Promise<{
        rows: Array<Record<string, unknown>>;
    }>;
}
export interface LeasedJob {
    jid: string;
    lease?: string | null;
}
export declare function transactionalAck<T>(db: SqlQueryable, job: LeasedJob, apply: (db: SqlQueryable) => Promise<T>, options?: {
    result?: unknown;
}): Promise<T>;
