// Package plural words a count with its noun for the messages people read: "1 step",
// "3 steps", "0 steps", never "1 steps".
package plural

import "fmt"

// Integer is the integer types a count comes in.
type Integer interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 | ~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64
}

// Of is n, a space and one when n is 1, many otherwise: Of(1, "step", "steps") is "1 step",
// Of(0, "step", "steps") "0 steps".
func Of[N Integer](n N, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}
