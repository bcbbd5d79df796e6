export { Client, MAX_BATCH, VERSION, newJid } from "./client.js";
export { Worker } from "./worker.js";
export { BatchClosed, BatchNotFound, Forbidden, JobNotFound, LeaseLost, NotUnique, PayloadTooLarge, ServerError, Unauthorized, Unavailable, ValidationError, WerkError, errorFromResponse, } from "./errors.js";
export { transactionalAck } from "./transactional.js";
