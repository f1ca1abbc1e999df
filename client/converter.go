package client

import (
	"encoding/json"
	"fmt"
)

// DataConverter turns values into payload bytes and back. Every workflow input,
// activity input and result crosses the wire through it, so a client and the
// workers it starts work for must use the same one.
type DataConverter interface {
	// ToPayload encodes v. A nil v encodes as no payload.
	ToPayload(v any) ([]byte, error)
	// FromPayload decodes data into v, a pointer. Empty data leaves v as it
	// is, so a function without a result can be read into any pointer.
	FromPayload(data []byte, v any) error
}

// JSON is the default DataConverter: encoding/json on both sides.
var JSON DataConverter = jsonConverter{}

type jsonConverter struct{}

func (jsonConverter) ToPayload(v any) ([]byte, error) {
	if v == nil {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode payload: %w", err)
	}
	return b, nil
}

func (jsonConverter) FromPayload(data []byte, v any) error {
	if len(data) == 0 || v == nil {
		return nil
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("decode payload into %T: %w", v, err)
	}
	return nil
}
