import { basename, dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

// The project root, whether this runs from src/ (tsx) or from dist/src/ (built).
const here = dirname(fileURLToPath(import.meta.url))
const above = dirname(here)
export const projectRoot = basename(above) === 'dist' ? dirname(above) : above

export const migrationsDir = join(projectRoot, 'migrations')
