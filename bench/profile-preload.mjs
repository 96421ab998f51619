// Preloaded into a gateway by bench/counts.ts --profile (node --import): a V8 CPU profile of a chosen window
// only (no start-up, no warm-up). The first SIGUSR2 starts the profiler, the second stops it and writes the
// profile to ROTOR_PROFILE_FILE, then ROTOR_PROFILE_FILE.done. Sampling every ROTOR_PROFILE_US µs (100).
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';

const file = process.env.ROTOR_PROFILE_FILE;
if (file) {
  const session = new Session();
  session.connect();
  let running = false;
  process.on('SIGUSR2', () => {
    if (!running) {
      running = true;
      session.post('Profiler.enable', () =>
        session.post('Profiler.setSamplingInterval', { interval: Number(process.env.ROTOR_PROFILE_US ?? 100) }, () =>
          session.post('Profiler.start'),
        ),
      );
      return;
    }
    running = false;
    session.post('Profiler.stop', (err, res) => {
      writeFileSync(file, JSON.stringify(err ? {} : res.profile));
      writeFileSync(`${file}.done`, '');
    });
  });
}
