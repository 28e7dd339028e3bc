import { Graphviz } from '@hpcc-js/wasm-graphviz';
import fs from 'fs';
const g = await Graphviz.load();
try { g.dot(fs.readFileSync(process.argv[2], 'utf8')); } catch (e) { process.exit(String(e).includes('table index') ? 3 : 1); }
