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
if (cli) process.exitCode = await cli.main(process.argv.slice(2));
