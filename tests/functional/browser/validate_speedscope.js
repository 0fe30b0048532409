// validate_speedscope.js - checks a speedscope JSON file against the file
// format schema that the speedscope npm package ships, with ajv. Prints
// {"valid": bool, "errors": [...], "schema": path} as JSON; exits 0 either way
// (the test decides), 2 on bad usage.
'use strict';

const fs = require('fs');
const Ajv = require('ajv');

const file = process.argv[2];
if (!file) {
  console.error('usage: node validate_speedscope.js FILE.json');
  process.exit(2);
}
const schemaPath = require.resolve('speedscope/dist/release/file-format-schema.json');
const schema = JSON.parse(fs.readFileSync(schemaPath, 'utf8'));
// allErrors: report every problem at once; strict: false, because the
// published schema carries "title" keywords inside $ref siblings.
const ajv = new Ajv({ allErrors: true, strict: false });
const validate = ajv.compile(schema);
const data = JSON.parse(fs.readFileSync(file, 'utf8'));
const valid = validate(data);
process.stdout.write(JSON.stringify({ valid, errors: validate.errors || [], schema: schemaPath }) + '\n');
