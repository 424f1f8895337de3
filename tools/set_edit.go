package tools

import (
	"errors"
	"fmt"
)

// Remove removes the named tools from the set; names it lacks are ignored.
func (s *Set) Remove(names ...string) {
	if len(names) == 0 {
		return
	}
	drop := make(map[string]bool, len(names))
	for _, n := range names {
		drop[n] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	kept := s.order[:0:0]
	for _, t := range s.order {
		name := t.Spec().Name
		if drop[name] && s.byKey[name] == t {
			delete(s.byKey, name)
			continue
		}
		kept = append(kept, t)
	}
	s.order = kept
}

// Replace removes the tools named in old and adds ts, at once: a reader sees
// the set before or after, never between. A tool of ts named like one of old
// takes its place in the order; the others follow at the end. Nothing changes
// when a tool of ts is nil, has an invalid name, shares its name with another
// of ts, or is named like a tool of the set that old does not name.
func (s *Set) Replace(old []string, ts []Tool) error {
	replaced := make(map[string]bool, len(old))
	for _, n := range old {
		replaced[n] = true
	}
	byName := make(map[string]Tool, len(ts))
	for _, t := range ts {
		if t == nil {
			return errors.New("replace tools: nil")
		}
		name := t.Spec().Name
		if !namePattern.MatchString(name) {
			return fmt.Errorf("replace tools: invalid name %q: must match %s", name, namePattern)
		}
		if _, dup := byName[name]; dup {
			return fmt.Errorf("replace tools: duplicate %q", name)
		}
		byName[name] = t
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for name := range byName {
		if _, taken := s.byKey[name]; taken && !replaced[name] {
			return fmt.Errorf("replace tools: duplicate %q", name)
		}
	}
	if s.byKey == nil {
		s.byKey = make(map[string]Tool)
	}
	order := make([]Tool, 0, len(s.order)+len(ts))
	placed := make(map[string]bool, len(ts))
	for _, t := range s.order {
		name := t.Spec().Name
		if !replaced[name] {
			order = append(order, t)
			continue
		}
		delete(s.byKey, name)
		if nt, ok := byName[name]; ok {
			order = append(order, nt)
			placed[name] = true
		}
	}
	for _, t := range ts {
		if name := t.Spec().Name; !placed[name] {
			order = append(order, t)
		}
	}
	for name, t := range byName {
		s.byKey[name] = t
	}
	s.order = order
	return nil
}
