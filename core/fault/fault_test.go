package fault

import (
	"errors"
	"fmt"
	"testing"
)

type codeErr struct{ c Class }

func (e codeErr) Error() string     { return "code" }
func (e codeErr) FaultClass() Class { return e.c }

func TestClassOf(t *testing.T) {
	base := errors.New("boom")
	tests := []struct {
		name string
		err  error
		want Class
	}{
		{"plain error is transient", base, ClassTransient},
		{"marked permanent", Permanent(base), ClassPermanent},
		{"marked terminal", Terminal(base), ClassTerminal},
		{"marked transient", Transient(base), ClassTransient},
		{"wrapped permanent keeps its class", fmt.Errorf("ctx: %w", Permanent(base)), ClassPermanent},
		{"outermost mark wins", Transient(fmt.Errorf("x: %w", Permanent(base))), ClassTransient},
		{"classifier", fmt.Errorf("x: %w", codeErr{ClassTerminal}), ClassTerminal},
		{"mark beats classifier", Permanent(codeErr{ClassTerminal}), ClassPermanent},
		{"joined errors use the first mark", errors.Join(base, Permanent(base)), ClassPermanent},
		{"shutdown is terminal", ErrShutdown, ClassTerminal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ClassOf(tt.err); got != tt.want {
				t.Fatalf("ClassOf = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestMarksKeepMessageAndChain(t *testing.T) {
	base := errors.New("boom")
	err := Permanent(base)
	if err.Error() != "boom" || !errors.Is(err, base) {
		t.Fatalf("Permanent changed the error: %q, Is=%v", err, errors.Is(err, base))
	}
	if Permanent(nil) != nil || Transient(nil) != nil || Terminal(nil) != nil {
		t.Fatal("marking nil must stay nil")
	}
	if IsPermanent(nil) || IsTerminal(nil) {
		t.Fatal("nil has no class")
	}
}
