// A server's own memory, as the memory tests measure it: the proportional set size (each resident
// page once, however many of the process's mappings share it) of its anonymous mappings (heap,
// stacks, KV caches, packed weights) and of the files under the given directories (model files).
//
// Not smaps_rollup's total: that includes the binary's and the shared libraries' pages, whose share
// moves with how many other processes map them (CI runs many servers at once; one exiting between
// two samples raised a test's figure by megabytes that the server never allocated).
import fs from 'node:fs';

const header = /^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(.*)$/;

export function ownMemory(pid, fileDirs = []) {
  let total = 0;
  let counted = false;
  for (const line of fs.readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n')) {
    const h = header.exec(line);
    if (h) {
      const name = h[1];
      counted = name === '' || name.startsWith('[') || fileDirs.some((d) => name.startsWith(d));
    } else if (counted && line.startsWith('Pss:')) {
      total += Number(/(\d+) kB/.exec(line)[1]) * 1024;
    }
  }
  return total;
}
