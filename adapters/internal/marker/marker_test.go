package marker

import "testing"

// Ids the adapter's check refuses get no marker, and Pattern finds the
// nonce and the id of a marker Set wrote, nothing else.
func TestSetAndPattern(t *testing.T) {
	valid := func(id string) bool { return id != "" && id[0] == 'U' }
	m := Set{Nonce: "N0NCE"}
	m.Add("", []string{"UALICE", "<!here>", "UBOB"}, valid)
	m.Add("r", []string{"UROLE"}, valid)
	got := m.String()
	if want := Open + "N0NCE:UALICE" + Close + ", " + Open + "N0NCE:UBOB" + Close + ", " + Open + "N0NCE:rUROLE" + Close; got != want {
		t.Fatalf("markers %q, want %q", got, want)
	}
	p := Pattern("([A-Z0-9]+)")
	all := p.FindAllStringSubmatch(got+" N0NCE:UEVE "+Open+"N0NCE:<!here>"+Close, -1)
	if len(all) != 2 || all[0][1] != "N0NCE" || all[0][2] != "UALICE" || all[1][2] != "UBOB" {
		t.Fatalf("matches %q", all)
	}
}
