package testutil

import "testing"

// Redial allows MaxRedials connects again, only after a refusal.
func TestRedial(t *testing.T) {
	var r Redial
	if r.Again(t, false, "a connect that failed otherwise") {
		t.Fatal("Again after a failure that is not a refusal")
	}
	for i := range MaxRedials {
		if !r.Again(t, true, "a refused connect", i) {
			t.Fatalf("refusal %d: no connect again", i+1)
		}
	}
	if r.Again(t, true, "one refusal too many") {
		t.Fatalf("connect again after %d refusals", MaxRedials+1)
	}
}
