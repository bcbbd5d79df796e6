export { Client, MAX_BATCH, VERSION, newJid, type BatchHandle, type ClientOptions } from "./client.js";
export { Worker, type Handler, type HandlerOptions, type Hook, type JobContext, type Middleware, type WorkerOptions } from "./worker.js";
export { TimeoutError, weightedOrder } from "./timeouts.js";
export {
  BatchClosed,
  BatchNotFound,
  Forbidden,
  JobNotFound,
  LeaseLost,
  NoRetry,
  NotUnique,
  PayloadTooLarge,
  ResultTooLarge,
  RetryIn,
  ServerError,
  Unauthorized,
  Unavailable,
  ValidationError,
  WerkError,
  errorFromResponse,
} from "./errors.js";
export { transactionalAck, type LeasedJob, type SqlQueryable } from "./transactional.js";
export type * from "./types.js";
export type { components, operations, paths } from "./openapi.js";
