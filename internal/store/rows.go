package store

import "database/sql"

// rowScanner is a row to read: a *sql.Row or the current row of a
// *sql.Rows.
type rowScanner = interface{ Scan(dest ...any) error }

// appendRows appends what scan reads from each of rows to out, and closes
// rows; op names the read in its errors. Callers whose answer lists
// nothing as [] rather than null pass an empty slice.
func appendRows[T any](out []T, rows *sql.Rows, op string, scan func(rowScanner) (T, error)) ([]T, error) {
	defer rows.Close()
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, mapErr(err, op)
		}
		out = append(out, v)
	}
	return out, mapErr(rows.Err(), op)
}
