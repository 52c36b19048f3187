package protocol

// Glob matches s against the pattern part of a permission rule, where *
// matches any run of characters (including '/' and '.'), ? any one
// character, and a backslash makes the character after it literal (\* is
// a star, \\ a backslash; a trailing backslash matches itself). The host
// matches rules with it, and a plugin leaves out what denied patterns
// match with it (Call.denied_patterns).
func Glob(pattern, s string) bool {
	px, sx := 0, 0
	nextPx, nextSx := -1, -1
	for px < len(pattern) || sx < len(s) {
		if px < len(pattern) {
			switch c := pattern[px]; c {
			case '*':
				nextPx, nextSx = px, sx+1
				px++
				continue
			case '?':
				if sx < len(s) {
					px++
					sx++
					continue
				}
			case '\\':
				lit, n := c, 1
				if px+1 < len(pattern) {
					lit, n = pattern[px+1], 2
				}
				if sx < len(s) && s[sx] == lit {
					px += n
					sx++
					continue
				}
			default:
				if sx < len(s) && s[sx] == c {
					px++
					sx++
					continue
				}
			}
		}
		if nextSx > 0 && nextSx <= len(s) {
			px, sx = nextPx, nextSx
			continue
		}
		return false
	}
	return true
}
