package external

import (
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/fixtures"
)

// TestMain builds the fixtures once and checks for leaked goroutines.
func TestMain(m *testing.M) { fixtures.Main(m) }
