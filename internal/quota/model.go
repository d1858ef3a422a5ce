// Package quota is Kafka's client quotas: the entities quotas are set on
// (user, client id, user and client id, and their defaults), the four
// quota keys, Kafka's precedence between entities, and the rate arithmetic
// of Kafka's quota managers (ClientQuotaManager's sampled rate and
// throttle time, ClientRequestQuotaManager's bounded throttle,
// ControllerMutationQuotaManager's token bucket), on an injectable clock.
//
// The package is pure: the quotas themselves are stored in the cluster
// metadata (internal/meta) and handed to Manager.SetQuotas on every change;
// protocol records usage and applies the throttle.
package quota

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
)

// Entity types (Kafka's ClientQuotaEntity.USER, CLIENT_ID, IP).
const (
	EntityUser     = "user"
	EntityClientID = "client-id"
	EntityIP       = "ip"
)

// Quota keys (Kafka's QuotaConfig).
const (
	ProducerByteRate       = "producer_byte_rate"
	ConsumerByteRate       = "consumer_byte_rate"
	RequestPercentage      = "request_percentage"
	ControllerMutationRate = "controller_mutation_rate"
)

// Component is one part of an entity: absent, the default (Kafka's
// <default>, a null name on the wire), or a name.
type Component struct {
	Present bool
	Default bool
	Name    string
}

// Named returns a component naming n.
func Named(n string) Component { return Component{Present: true, Name: n} }

// DefaultComponent is the <default> component.
var DefaultComponent = Component{Present: true, Default: true}

// Entity is what a quota is set on: a user, a client id, or both, each
// possibly the default.
type Entity struct {
	User     Component
	ClientID Component
}

// String renders the entity as Kafka logs it ("user alice client-id x").
func (e Entity) String() string {
	var parts []string
	show := func(kind string, c Component) {
		if !c.Present {
			return
		}
		if c.Default {
			parts = append(parts, "default "+kind)
		} else {
			parts = append(parts, kind+" "+c.Name)
		}
	}
	show(EntityUser, e.User)
	show(EntityClientID, e.ClientID)
	return strings.Join(parts, " ")
}

// Values are the quota keys set on one entity.
type Values map[string]float64

// keyTypes lists the keys of user and client-id entities with their
// Kafka types (QuotaConfig.userAndClientQuotaConfigs): byte rates are
// LONG, the others DOUBLE.
var keyTypes = map[string]bool{ // true: integral (LONG)
	ProducerByteRate:       true,
	ConsumerByteRate:       true,
	RequestPercentage:      false,
	ControllerMutationRate: false,
}

// Keys are the quota keys Strata enforces, sorted.
func Keys() []string {
	out := make([]string, 0, len(keyTypes))
	for k := range keyTypes {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ErrInvalid marks an alteration or filter Kafka answers INVALID_REQUEST;
// ErrUnsupported one it answers UNSUPPORTED_VERSION.
var (
	ErrInvalid     = errors.New("invalid request")
	ErrUnsupported = errors.New("unsupported version")
)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// EntityPart is one (type, name) pair of an entity as the wire carries it;
// a nil name is the default.
type EntityPart struct {
	Type string
	Name *string
}

// ParseEntity checks an AlterClientQuotas entity with Kafka's rules
// (ClientQuotaControlManager.validateEntity and configKeysForEntityType)
// and messages. IP entities are refused: Strata does not enforce
// connection_creation_rate.
func ParseEntity(parts []EntityPart) (Entity, error) {
	var e Entity
	if len(parts) == 0 {
		return e, invalid("Invalid empty client quota entity")
	}
	seen := map[string]bool{}
	for _, p := range parts {
		if seen[p.Type] {
			return e, invalid("Invalid client quota entity, duplicate entity entry %s", p.Type)
		}
		seen[p.Type] = true
		c := DefaultComponent
		if p.Name != nil {
			c = Named(*p.Name)
		}
		switch p.Type {
		case EntityUser:
			e.User = c
		case EntityClientID:
			e.ClientID = c
		case EntityIP:
			return e, invalid("IP quotas (connection_creation_rate) are not supported by Strata")
		default:
			return e, invalid("Unhandled client quota entity type: %s", p.Type)
		}
		if p.Name != nil && *p.Name == "" {
			return e, invalid("Empty %s not supported", p.Type)
		}
	}
	return e, nil
}

// Parts renders an entity as the wire carries it (user first).
func (e Entity) Parts() []EntityPart {
	var out []EntityPart
	add := func(t string, c Component) {
		if !c.Present {
			return
		}
		p := EntityPart{Type: t}
		if !c.Default {
			n := c.Name
			p.Name = &n
		}
		out = append(out, p)
	}
	add(EntityUser, e.User)
	add(EntityClientID, e.ClientID)
	return out
}

// Op is one alteration of a key: set Value, or remove the key.
type Op struct {
	Key    string
	Value  float64
	Remove bool
}

// Apply returns cur altered by ops, with Kafka's checks
// (ClientQuotaControlManager.alterClientQuotas and validateQuotaKeyValue):
// a key may appear once, must be a known key, and a value must be > 0
// and, for the byte rates, integral. An empty result means the entity
// holds no quota any more.
func Apply(cur Values, ops []Op) (Values, error) {
	out := Values{}
	for k, v := range cur {
		out[k] = v
	}
	seen := map[string]bool{}
	for _, op := range ops {
		if seen[op.Key] {
			return nil, invalid("Duplicate quota key %s not updating quota for this entity", op.Key)
		}
		seen[op.Key] = true
		if op.Remove {
			delete(out, op.Key)
			continue
		}
		integral, ok := keyTypes[op.Key]
		if !ok {
			return nil, invalid("Invalid configuration key %s", op.Key)
		}
		if !(op.Value > 0) {
			return nil, invalid("Quota %s must be greater than 0", op.Key)
		}
		if integral {
			if op.Value > math.MaxInt64 {
				return nil, invalid("Proposed value for %s is too large for a LONG.", op.Key)
			}
			if math.Abs(math.Mod(op.Value, 1)) > 1e-6 {
				return nil, invalid("%s cannot be a fractional value.", op.Key)
			}
		}
		out[op.Key] = op.Value
	}
	return out, nil
}

// Match types of a DescribeClientQuotas filter component.
const (
	MatchExact     = 0
	MatchDefault   = 1
	MatchSpecified = 2
)

// FilterPart is one component of a DescribeClientQuotas filter.
type FilterPart struct {
	Type      string
	MatchType int8
	Match     *string
}

// Filter selects entities for DescribeClientQuotas.
type Filter struct {
	exact     map[string]*string // type -> name (nil: the default)
	specified map[string]bool
	strict    bool
}

// ParseFilter checks a DescribeClientQuotas filter with Kafka's rules and
// messages (ClientQuotasImage.describe): INVALID_REQUEST for a malformed
// component, UNSUPPORTED_VERSION for an unknown entity type.
func ParseFilter(parts []FilterPart, strict bool) (Filter, error) {
	f := Filter{exact: map[string]*string{}, specified: map[string]bool{}, strict: strict}
	for _, p := range parts {
		if p.Type == "" {
			return f, invalid("Invalid empty entity type.")
		}
		if _, ok := f.exact[p.Type]; ok || f.specified[p.Type] {
			return f, invalid("Entity type %s cannot appear more than once in the filter.", p.Type)
		}
		if p.Type != EntityIP && p.Type != EntityUser && p.Type != EntityClientID {
			return f, fmt.Errorf("%w: Unsupported entity type %s", ErrUnsupported, p.Type)
		}
		switch p.MatchType {
		case MatchExact:
			if p.Match == nil {
				return f, invalid("Request specified MATCH_TYPE_EXACT, but set match string to null.")
			}
			f.exact[p.Type] = p.Match
		case MatchDefault:
			if p.Match != nil {
				return f, invalid("Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")
			}
			f.exact[p.Type] = nil
		case MatchSpecified:
			if p.Match != nil {
				return f, invalid("Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.")
			}
			f.specified[p.Type] = true
		default:
			return f, invalid("Unknown match type %d", p.MatchType)
		}
	}
	_, ipExact := f.exact[EntityIP]
	if ipExact || f.specified[EntityIP] {
		if len(f.exact)+len(f.specified) > 1 {
			return f, invalid("Invalid entity filter component combination. IP filter component should not be used with user or clientId filter component.")
		}
	}
	return f, nil
}

// Matches reports whether the filter selects e (Kafka's
// ClientQuotasImage.matches): every exact component is present with that
// name (or is the default), every specified type is present, and with
// strict no other component is present.
func (f Filter) Matches(e Entity) bool {
	comps := map[string]Component{}
	if e.User.Present {
		comps[EntityUser] = e.User
	}
	if e.ClientID.Present {
		comps[EntityClientID] = e.ClientID
	}
	if f.strict && len(comps) != len(f.exact)+len(f.specified) {
		return false
	}
	for t, name := range f.exact {
		c, ok := comps[t]
		if !ok {
			return false
		}
		if name == nil != c.Default || (name != nil && *name != c.Name) {
			return false
		}
	}
	for t := range f.specified {
		if _, ok := comps[t]; !ok {
			return false
		}
	}
	return true
}
