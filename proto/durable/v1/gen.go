// Package durablev1 holds the wire contract of durable (durable.proto) and the
// records durabled stores (record.proto), with their generated Go code.
package durablev1

//go:generate sh -c "cd ../.. && go tool buf generate"
