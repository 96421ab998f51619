// Loaded with `node --import` into a real `rotor start` by tests of what the daemon does with a fault that
// escapes every handler: SIGUSR2 throws from a fresh turn of the event loop, as a bug in any callback would.
process.on('SIGUSR2', () => {
  setImmediate(() => {
    throw new Error('planted fault');
  });
});
