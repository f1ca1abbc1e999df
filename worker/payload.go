package worker

import (
	"fmt"

	"github.com/tinyllm/durable/activity"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// What an attempt reports, as the daemon's request fields name it, and as a
// person reads it in a PayloadTooLarge message.
var payloadFields = map[string]string{
	"result":          "the activity's result",
	"failure.message": "the activity's failure message",
	"failure.details": "the activity's failure details",
	"details":         "the heartbeat's details",
}

// payloadTooLarge is the failure that replaces a payload over the daemon's
// bound: non-retryable, since the same code would produce the same payload
// again, with the size and the bound in its message. was, when the payload
// belonged to a failure, is named so that its type is not lost. The message
// itself stays within the bound.
func payloadTooLarge(field string, size int, limit int64, was *durablev1.Failure) *durablev1.Failure {
	msg := fmt.Sprintf("%s: %d bytes, over the daemon's payload limit of %d bytes (--max-payload)", payloadFields[field], size, limit)
	return tooLargeFailure(msg, was, limit)
}

// payloadRefused is payloadTooLarge when the worker learnt of the bound only
// from the daemon's refusal, whose reason gives it.
func payloadRefused(field, reason string, size int, was *durablev1.Failure) *durablev1.Failure {
	msg := fmt.Sprintf("%s: %d bytes, refused by the daemon: %s: %s", payloadFields[field], size, field, reason)
	return tooLargeFailure(msg, was, 0)
}

func tooLargeFailure(msg string, was *durablev1.Failure, limit int64) *durablev1.Failure {
	if was != nil {
		msg += fmt.Sprintf("; the failure was %s: %s", was.GetType(), cut(was.GetMessage(), 256))
	}
	if limit > 0 {
		msg = cut(msg, int(limit))
	}
	return activity.FailureFromError(activity.NewNonRetryable(activity.TypePayloadTooLarge, msg))
}

// oversized checks an attempt's outcome against the bound the daemon sent
// with the task (0: not told) and returns the PayloadTooLarge failure that
// replaces it, or nil when it fits.
func oversized(result []byte, f *durablev1.Failure, limit int64) *durablev1.Failure {
	if limit <= 0 {
		return nil
	}
	switch {
	case int64(len(result)) > limit:
		return payloadTooLarge("result", len(result), limit, nil)
	case int64(len(f.GetMessage())) > limit:
		return payloadTooLarge("failure.message", len(f.GetMessage()), limit, f)
	case int64(len(f.GetDetails())) > limit:
		return payloadTooLarge("failure.details", len(f.GetDetails()), limit, f)
	}
	return nil
}

// refusedPayload returns the PayloadTooLarge failure that replaces an
// outcome the daemon refused for a payload field, or nil when err is
// something else.
func refusedPayload(err error, result []byte, f *durablev1.Failure) *durablev1.Failure {
	field, reason, ok := refusedField(err)
	if !ok {
		return nil
	}
	switch field {
	case "result":
		return payloadRefused(field, reason, len(result), nil)
	case "failure.message":
		return payloadRefused(field, reason, len(f.GetMessage()), f)
	case "failure.details":
		return payloadRefused(field, reason, len(f.GetDetails()), f)
	}
	return nil
}
