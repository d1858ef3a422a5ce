package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// configError is a validation error; it wraps ErrInvalid.
type configError struct{ msg string }

func (e *configError) Error() string { return e.msg }
func (e *configError) Unwrap() error { return ErrInvalid }

// invalidf builds an error wrapping ErrInvalid.
func invalidf(format string, args ...any) error {
	return &configError{msg: fmt.Sprintf(format, args...)}
}

// invalidValue is the standard message for a rejected value.
func invalidValue(name, value, reason string) error {
	return invalidf("invalid value %q for configuration %s: %s", value, name, reason)
}

// check is a value rule beyond the type: reason returns "" when v (already
// type-checked) is fine, else why it is not. allowed describes the rule.
type check struct {
	reason  func(v string) string
	allowed string
}

// def builds a table row whose Validate checks the type then the rule.
func def(name string, typ Type, dflt string, c check, doc string, synonyms ...string) Setting {
	s := Setting{Name: name, Type: typ, Default: dflt, Doc: doc, BrokerSynonyms: synonyms, Allowed: c.allowed}
	s.Validate = func(v string) error {
		shown := v
		if typ == TypePassword { // secrets never appear in errors or logs
			shown = "[hidden]"
		}
		if r := typeReason(typ, v); r != "" {
			return invalidValue(name, shown, r)
		}
		if c.reason != nil {
			if r := c.reason(strings.TrimSpace(v)); r != "" {
				return invalidValue(name, shown, r)
			}
		}
		return nil
	}
	return s
}

// typeReason reports why v is not a value of typ ("" if it is).
func typeReason(typ Type, v string) string {
	v = strings.TrimSpace(v)
	switch typ {
	case TypeBoolean:
		if !strings.EqualFold(v, "true") && !strings.EqualFold(v, "false") {
			return "not a boolean (expected true or false)"
		}
	case TypeShort, TypeInt, TypeLong:
		bits := map[Type]int{TypeShort: 16, TypeInt: 32, TypeLong: 64}[typ]
		if _, err := strconv.ParseInt(v, 10, bits); err != nil {
			if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
				return fmt.Sprintf("out of range for a %d-bit integer", bits)
			}
			return "not a number"
		}
	case TypeDouble:
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return "not a number"
		}
	}
	return ""
}

// anyValue accepts every value of the type.
var anyValue = check{}

// atLeast accepts integers >= min.
func atLeast(min int64) check {
	return check{
		allowed: fmt.Sprintf("[%d,...]", min),
		reason: func(v string) string {
			n, _ := strconv.ParseInt(v, 10, 64)
			if n < min {
				return fmt.Sprintf("must be at least %d", min)
			}
			return ""
		},
	}
}

// zeroOrAtLeast accepts 0 (off) or integers >= min.
func zeroOrAtLeast(min int64) check {
	return check{
		allowed: fmt.Sprintf("0, or [%d,...]", min),
		reason: func(v string) string {
			n, _ := strconv.ParseInt(v, 10, 64)
			if n != 0 && n < min {
				return fmt.Sprintf("must be 0 (off) or at least %d", min)
			}
			return ""
		},
	}
}

// floatBetween accepts doubles in [min, max].
func floatBetween(min, max float64) check {
	return check{
		allowed: fmt.Sprintf("[%g,...,%g]", min, max),
		reason: func(v string) string {
			f, _ := strconv.ParseFloat(v, 64)
			if f < min || f > max {
				return fmt.Sprintf("must be between %g and %g", min, max)
			}
			return ""
		},
	}
}

// floatAtLeast accepts doubles >= min.
func floatAtLeast(min float64) check {
	return check{
		allowed: fmt.Sprintf("[%g,...]", min),
		reason: func(v string) string {
			f, _ := strconv.ParseFloat(v, 64)
			if f < min {
				return fmt.Sprintf("must be at least %g", min)
			}
			return ""
		},
	}
}

// oneOf accepts exactly one of the given strings (case-sensitive, as Kafka).
func oneOf(values ...string) check {
	list := strings.Join(values, ", ")
	return check{
		allowed: "one of " + list,
		reason: func(v string) string {
			for _, ok := range values {
				if v == ok {
					return ""
				}
			}
			return "must be one of " + list
		},
	}
}

// subsetOf accepts a non-empty comma-separated list of distinct values
// from the given set.
func subsetOf(values ...string) check {
	list := strings.Join(values, ", ")
	return check{
		allowed: "non-empty list of " + list,
		reason: func(v string) string {
			items := splitList(v)
			if len(items) == 0 {
				return "must be a non-empty list of " + list
			}
			seen := map[string]bool{}
			for _, it := range items {
				found := false
				for _, ok := range values {
					found = found || it == ok
				}
				if !found {
					return fmt.Sprintf("%q is not one of %s", it, list)
				}
				if seen[it] {
					return fmt.Sprintf("%q is listed twice", it)
				}
				seen[it] = true
			}
			return ""
		},
	}
}

// splitList splits a comma-separated list, trimming blanks and dropping
// empty items.
func splitList(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// custom wraps an arbitrary rule.
func custom(allowed string, reason func(string) string) check {
	return check{allowed: allowed, reason: reason}
}
