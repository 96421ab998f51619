// Preloaded into a gateway by bench/feedback.ts (node --import): on each SIGUSR2, prints process.nextTick's
// function and feedback vector (V8's %DebugPrint, on stdout) between `@@FB sigN` and `@@END` lines. Natives
// syntax is allowed only while the printing function is compiled.
import { setFlagsFromString } from 'node:v8';

setFlagsFromString('--allow-natives-syntax');
const print = new Function('f', '%DebugPrint(f)');
setFlagsFromString('--no-allow-natives-syntax');
let n = 0;
process.on('SIGUSR2', () => {
  process.stdout.write(`\n@@FB sig${++n}\n`);
  print(process.nextTick);
  process.stdout.write('\n@@END\n');
});
