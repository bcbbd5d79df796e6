// Opens one connection with the npm faktory-worker client (handshake included) and closes it.
// node connect.js URL  -> exit 0 when the server accepted the handshake, 3 when it refused.
const faktory = require("faktory-worker");

faktory
  .connect({ url: process.argv[2] })
  .then(async (client) => {
    await client.close();
    process.stdout.write("connected\n");
  })
  .catch((err) => {
    process.stdout.write(`refused: ${err.message}\n`);
    process.exit(3);
  });
