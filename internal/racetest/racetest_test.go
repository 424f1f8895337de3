package racetest

import "testing"

// Peak's Most is how many were inside together, not how many entered.
func TestPeak(t *testing.T) {
	var p Peak
	a := p.Enter()
	b := p.Enter()
	b()
	c := p.Enter()
	c()
	a()
	p.Enter()()
	if p.Most() != 2 {
		t.Fatalf("most %d, want 2", p.Most())
	}
	p.Reset()
	p.Enter()()
	if p.Most() != 1 {
		t.Fatalf("most after Reset %d, want 1", p.Most())
	}
}
