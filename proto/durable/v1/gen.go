// Package durablev1 holds the wire contract of durable (durable.proto) and the
// records durabled stores (record.proto), with their generated Go code.
package durablev1

//go:generate go run ../../../internal/protoc -I ../.. -out ../.. -opt paths=source_relative -plugin "go tool protoc-gen-go" -plugin "go tool protoc-gen-go-grpc" durable/v1/durable.proto durable/v1/record.proto
