package transport

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/maos-project/maos/api"
)

// TestOpenAPIErrorCodes: the document's error schema lists exactly the
// codes of errors.go's table.
func TestOpenAPIErrorCodes(t *testing.T) {
	var doc struct {
		Components struct {
			Schemas struct {
				Error struct {
					Properties struct {
						Error struct {
							Properties struct {
								Code struct {
									Enum []string `json:"enum"`
								} `json:"code"`
							} `json:"properties"`
						} `json:"error"`
					} `json:"properties"`
				} `json:"Error"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(openAPIDoc, &doc); err != nil {
		t.Fatal(err)
	}
	got := doc.Components.Schemas.Error.Properties.Error.Properties.Code.Enum
	want := api.Codes()
	if !slices.Equal(got, want) {
		t.Errorf("the document's error codes are %v, errors.go's are %v", got, want)
	}
}
