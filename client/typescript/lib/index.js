export { Client, MAX_BATCH, VERSION, newJid } from "./client.js";
export { Worker } from "./worker.js";
export { TimeoutError, weightedOrder } from "./timeouts.js";
export { BatchClosed, BatchNotFound, Forbidden, JobNotFound, LeaseLost, NoRetry, NotUnique, PayloadTooLarge, ResultTooLarge, RetryIn, ServerError, Unauthorized, Unavailable, ValidationError, WerkError, errorFromResponse, } from "./errors.js";
export { transactionalAck } from "./transactional.js";
