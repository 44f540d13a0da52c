// Keeps one core busy for test:stress: it spins until its parent is gone or the deadline passes, so
// a stress run that is killed leaves no spinner behind.
const parent = process.ppid;
const deadline = Date.now() + Number(process.argv[2] ?? 3_600_000);
let alive = true;
while (alive && Date.now() < deadline) {
  for (let i = 0; i < 5_000_000; i++);
  try {
    process.kill(parent, 0);
  } catch {
    alive = false;
  }
}
