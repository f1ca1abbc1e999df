// Command protoc compiles .proto files with protocompile and runs protoc
// plugins on them, the way protoc does, so that `go generate` needs nothing
// but the Go toolchain. The plugins are the tool lines of go.mod.
//
//	go run ./internal/protoc -I proto -plugin "go tool protoc-gen-go" -opt paths=source_relative -out proto durable/v1/durable.proto
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/pluginpb"
)

type plugins []string

func (p *plugins) String() string     { return strings.Join(*p, ",") }
func (p *plugins) Set(v string) error { *p = append(*p, v); return nil }

func main() {
	var plugs plugins
	include := flag.String("I", ".", "the import root of the .proto files")
	out := flag.String("out", ".", "where generated files are written")
	opt := flag.String("opt", "", "the parameter passed to every plugin")
	flag.Var(&plugs, "plugin", "a plugin command line (repeatable)")
	flag.Parse()
	if len(plugs) == 0 || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: protoc -I DIR -out DIR -plugin CMD [-plugin CMD] [-opt PARAM] FILE.proto...")
		os.Exit(2)
	}
	if err := run(*include, *out, *opt, plugs, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "protoc:", err)
		os.Exit(1)
	}
}

func run(include, out, opt string, plugs, files []string) error {
	c := protocompile.Compiler{
		Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{ImportPaths: []string{include}}),
		// Plugins read comments from source info.
		SourceInfoMode: protocompile.SourceInfoStandard,
	}
	compiled, err := c.Compile(context.Background(), files...)
	if err != nil {
		return err
	}
	req := &pluginpb.CodeGeneratorRequest{FileToGenerate: files, Parameter: proto.String(opt)}
	seen := map[string]bool{}
	var add func(fd protoreflect.FileDescriptor)
	add = func(fd protoreflect.FileDescriptor) { // dependencies first, as protoc sends them
		if seen[fd.Path()] {
			return
		}
		seen[fd.Path()] = true
		imports := fd.Imports()
		for i := 0; i < imports.Len(); i++ {
			add(imports.Get(i).FileDescriptor)
		}
		req.ProtoFile = append(req.ProtoFile, protodesc.ToFileDescriptorProto(fd))
	}
	for _, f := range compiled {
		add(f)
	}
	input, err := proto.Marshal(req)
	if err != nil {
		return err
	}
	for _, p := range plugs {
		if err := runPlugin(p, input, out); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
	}
	return nil
}

func runPlugin(command string, input []byte, out string) error {
	args := strings.Fields(command)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin = bytes.NewReader(input)
	cmd.Stderr = os.Stderr
	output, err := cmd.Output()
	if err != nil {
		return err
	}
	var resp pluginpb.CodeGeneratorResponse
	if err := proto.Unmarshal(output, &resp); err != nil {
		return err
	}
	if resp.Error != nil {
		return fmt.Errorf("%s", resp.GetError())
	}
	for _, f := range resp.GetFile() {
		path := filepath.Join(out, f.GetName())
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(f.GetContent()), 0o644); err != nil {
			return err
		}
	}
	return nil
}
