#!/usr/bin/env node
// Thin launcher: the CLI lives in the compiled package (npm install builds it).
import { main } from '../dist/cli/main.js';

process.exitCode = await main(process.argv);
