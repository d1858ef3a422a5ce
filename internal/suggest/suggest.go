// Package suggest finds the closest known word to a mistyped one, for the
// "did you mean" hints of configuration errors and the command line.
package suggest

import "strings"

// Closest returns the candidate nearest to word by edit distance
// (case-insensitive), or "" when none is close enough to be a likely typo:
// at most a third of the word's length in edits (at least 1, at most 3),
// or a candidate that starts with word or has word as a dot- or
// dash-separated part ("dirs" -> "log.dirs"). Ties go to the candidate
// listed first.
func Closest(word string, candidates []string) string {
	w := strings.ToLower(word)
	limit := min(max(len(w)/3, 1), 3)
	best, bestDist := "", limit+1
	for _, c := range candidates {
		lc := strings.ToLower(c)
		if lc == w {
			return c
		}
		if d := distance(w, lc); d < bestDist {
			best, bestDist = c, d
		}
	}
	if best != "" {
		return best
	}
	if len(w) < 3 {
		return ""
	}
	for _, c := range candidates {
		lc := strings.ToLower(c)
		if strings.HasPrefix(lc, w) || hasPart(lc, w) {
			return c
		}
	}
	return ""
}

// hasPart reports whether w is one of the dot-, dash- or
// underscore-separated parts of s, or a run of them.
func hasPart(s, w string) bool {
	for i := strings.Index(s, w); i >= 0; {
		end := i + len(w)
		if (i == 0 || isSep(s[i-1])) && (end == len(s) || isSep(s[end])) {
			return true
		}
		next := strings.Index(s[i+1:], w)
		if next < 0 {
			break
		}
		i += 1 + next
	}
	return false
}

func isSep(c byte) bool { return c == '.' || c == '-' || c == '_' }

// distance is the optimal string alignment distance of a and b: the
// Levenshtein distance with a swap of two adjacent characters counted as
// one edit (the commonest typo).
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
