'use strict';
// buildIndex(name, rows, {key}): a table given as rows or columns split into
// the build's keys and payload. `rows` is an array of row objects
// ([{id: 1, type: 'a'}, ...]; a column missing from a row is null there) or an
// object of columns ({id: [...], type: [...]}, each values or {type, values,
// valid} as a payload column). The `key` column(s) are the keys; every other
// column is a payload column of the same name, its type inferred as a payload
// column's (./columns inferType) unless given as {type, values}.
const {DtypeError, InvalidArgumentError} = require('./errors');
const {describeValue} = require('./columns');

/** An array of row objects as an object of columns, in the order the rows first name them. */
function rowsToColumns(rows) {
  const columns = {};
  rows.forEach((row, i) => {
    if (row === null || typeof row !== 'object' || Array.isArray(row) || ArrayBuffer.isView(row)) {
      throw new DtypeError(`rows[${i}]: expected an object of column values, got ${describeValue(row)}`);
    }
    for (const name of Object.keys(row)) {
      if (!Object.prototype.hasOwnProperty.call(columns, name)) columns[name] = new Array(rows.length).fill(null);
      columns[name][i] = row[name] === undefined ? null : row[name];
    }
  });
  return columns;
}

/**
 * {keys, payload} of a build from `table` (rows or columns, see above) keyed by
 * `key`: one column name (integer keys, or a key column of strings or
 * Uint8Arrays) or an array of names (the columns of a key schema, in that
 * order, as an object of columns). A missing key column is a DtypeError naming
 * it and the table's columns; `payload` given beside `key` an
 * InvalidArgumentError.
 */
function splitTable(table, key, payload) {
  const names = typeof key === 'string' ? [key] : key;
  if (!Array.isArray(names) || names.length === 0 || !names.every((n) => typeof n === 'string' && n !== '')) {
    throw new InvalidArgumentError(`key: expected a column name or an array of column names, got ${describeValue(key)}`);
  }
  if (payload !== undefined && payload !== null) {
    throw new InvalidArgumentError('payload and key exclude each other: with key, every column of the rows but the key is a payload column');
  }
  let columns;
  if (Array.isArray(table)) {
    columns = rowsToColumns(table);
  } else if (table !== null && typeof table === 'object' && !ArrayBuffer.isView(table)) {
    columns = table;
  } else {
    throw new DtypeError(`keys: with key, expected an array of row objects or an object of columns, got ${describeValue(table)}`);
  }
  const present = Object.keys(columns);
  for (const n of names) {
    if (!present.includes(n)) {
      throw new DtypeError(`key: the rows have no column "${n}" (their columns: ${present.map((c) => `"${c}"`).join(', ') || 'none'})`);
    }
  }
  const keys = typeof key === 'string' ? columns[key] : Object.fromEntries(names.map((n) => [n, columns[n]]));
  const rest = Object.fromEntries(present.filter((c) => !names.includes(c)).map((c) => [c, columns[c]]));
  return {keys, payload: rest};
}

module.exports = {splitTable};
