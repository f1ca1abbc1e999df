package engine

import (
	"github.com/tinyllm/durable/activity"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// ApplyPatch is activity.ApplyPatch, the one meaning of an OptionsPatch,
// under the name the engine's callers know.
func ApplyPatch(opts *durablev1.ActivityOptions, p *durablev1.OptionsPatch) (*durablev1.ActivityOptions, []string) {
	return activity.ApplyPatch(opts, p)
}
