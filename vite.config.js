import { defineConfig } from 'vite';

// WebGPU needs a secure context: serve on 127.0.0.1 (never file://).
export default defineConfig({
  server: { host: '127.0.0.1', port: 5173 },
  preview: { host: '127.0.0.1', port: 5173 },
  worker: { format: 'es' },
  build: { target: 'es2022' },
});
