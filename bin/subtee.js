#!/usr/bin/env node
let cli;
try {
  cli = await import('../dist/src/cli/main.js');
} catch (err) {
  // Node reads subtee's modules side by side: under a very low `ulimit -n` it runs out of
  // descriptors before subtee runs. Anything else is a broken install: its own error shows.
  if (err?.code !== 'EMFILE' && err?.code !== 'ENFILE') throw err;
  process.stderr.write(
    'subtee: too many open files to load subtee (ulimit -n is too low); raise the limit, ' +
      'e.g. ulimit -n 1024 [ERR_FILE_LIMIT]\n',
  );
  process.exitCode = 3;
}
if (cli) {
  const code = await cli.main(process.argv.slice(2));
  process.exitCode = code;
  // The run has ended: nothing left running (a plugin's timer or socket, a promise it never
  // settled) holds subtee once stdout and stderr have taken what was written for them.
  await Promise.all([process.stdout, process.stderr].map(written));
  process.exit(code);
}

/** Resolves once `stream` holds nothing more to write (or is gone). */
function written(stream) {
  if (stream.destroyed || stream.writableLength === 0) return undefined;
  return new Promise((resolve) => {
    stream.once('drain', resolve);
    stream.once('close', resolve);
  });
}
