package confirm

// Step-up (confirmation.step_up): an allow of a call of a tier that needs
// more than a chat click counts only when made with that assurance, on
// the web console's page. A chat click proves only that someone holding
// the chat session clicked; a fresh sign-in (sso) proves the provider saw
// the person within the last minutes; a passkey proves the person's
// device signed this very call.

// Assurance is how a vote was made, weakest first.
type Assurance string

const (
	AssuranceChat    Assurance = "chat"    // a click in chat, or a page without a fresh sign-in
	AssuranceSSO     Assurance = "sso"     // the page, signed in within FreshSignIn
	AssurancePasskey Assurance = "passkey" // the page, with a passkey's assertion of the call
)

// Rank orders assurances: a vote of a higher rank satisfies a lower need.
func (a Assurance) Rank() int {
	switch a {
	case AssuranceSSO:
		return 1
	case AssurancePasskey:
		return 2
	}
	return 0
}

// Counts reports whether a vote made with a counts where need is
// needed ("" is a chat click).
func (a Assurance) Counts(need Assurance) bool { return a.Rank() >= need.Rank() }

// CountedBy lists the stored assurances of votes that count where need is
// needed ("" is a chat click's), for storage's queries.
func CountedBy(need Assurance) []Assurance {
	var out []Assurance
	for _, a := range []Assurance{"", AssuranceChat, AssuranceSSO, AssurancePasskey} {
		if a.Counts(need) {
			out = append(out, a)
		}
	}
	return out
}

// Valid reports whether a is one of the assurances.
func (a Assurance) Valid() bool {
	return a == AssuranceChat || a == AssuranceSSO || a == AssurancePasskey
}

// StepUp is what each tier's allows need; a tier it does not name needs a
// chat click.
type StepUp map[Risk]Assurance

// Needs is what an allow of a call of risk needs ("": the default tier,
// medium).
func (s StepUp) Needs(risk Risk) Assurance {
	if risk == "" {
		risk = RiskMedium
	}
	if a, ok := s[risk]; ok && a.Valid() {
		return a
	}
	return AssuranceChat
}

// Satisfied reports whether a vote made with a counts for a call of risk.
func (s StepUp) Satisfied(risk Risk, a Assurance) bool { return a.Counts(s.Needs(risk)) }
