// Runs SQL statements in an in-memory DuckDB and prints the rows of the
// last one as a JSON array of objects (integers as decimal strings, so that
// int64 values survive). The Go tests call it:
//
//   node query.mjs "SELECT count(*) AS n FROM read_parquet('x.parquet')"
import { DuckDBInstance } from '@duckdb/node-api';

const statements = process.argv.slice(2);
if (statements.length === 0) {
  console.error('usage: node query.mjs SQL [SQL ...]');
  process.exit(2);
}
const db = await DuckDBInstance.create(':memory:');
const con = await db.connect();
let rows = [];
for (const sql of statements) {
  rows = (await con.runAndReadAll(sql)).getRowObjectsJson();
}
process.stdout.write(JSON.stringify(rows) + '\n');
