#!/usr/bin/env node
// Writes the JSON Schemas of the two configuration files into dist/, from the zod schemas
// tsc compiled there, so the package ships them: `"$schema":
// "./node_modules/brokered-shell/dist/config.schema.json"` in <home>/config.json, and
// `dist/project-config.schema.json` in a project's .brokered-shell.json. Run after every
// `tsc -p tsconfig.build.json` (npm run build / test / prepare do).
import { renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const SCHEMA_FILES = { home: 'dist/config.schema.json', project: 'dist/project-config.schema.json' };

const { configJsonSchema } = await import(pathToFileURL(path.join(root, 'dist', 'config', 'schema.js')).href);
const { projectConfigSchema } = await import(pathToFileURL(path.join(root, 'dist', 'config', 'project.js')).href);
const { z } = await import('zod');

for (const [file, schema] of [
  [SCHEMA_FILES.home, configJsonSchema()],
  [SCHEMA_FILES.project, z.toJSONSchema(projectConfigSchema, { io: 'input' })],
]) {
  const target = path.join(root, file);
  const temp = `${target}.${process.pid}.tmp`;
  writeFileSync(temp, `${JSON.stringify(schema, null, 2)}\n`);
  renameSync(temp, target);
}
console.log(`config-schema: ${Object.values(SCHEMA_FILES).join(', ')}`);
