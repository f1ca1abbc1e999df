package server

import (
	"context"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// Policy overrides: operators replace retry policy and timeout fields of an
// activity type without a redeploy; everyone who may read sees them.

// SetPolicyOverride validates the patch like a schedule's options (and that
// it sets something) and sets the override, in the audit log under the
// calling principal.
func (s *Server) SetPolicyOverride(ctx context.Context, req *durablev1.SetPolicyOverrideRequest) (*durablev1.PolicyOverride, error) {
	const method = "SetPolicyOverride"
	if err := s.check().setPolicyOverride(req); err != nil {
		return nil, s.toStatus(ctx, method, err)
	}
	p, err := s.principal(ctx)
	if err != nil {
		return nil, err
	}
	resp, err := s.engine.SetPolicyOverride(ctx, p.actor(), req)
	return reply(s, ctx, method, resp, err)
}

// ListPolicyOverrides returns every override in force.
func (s *Server) ListPolicyOverrides(ctx context.Context, req *durablev1.ListPolicyOverridesRequest) (*durablev1.ListPolicyOverridesResponse, error) {
	resp, err := s.engine.ListPolicyOverrides(ctx, req)
	return reply(s, ctx, "ListPolicyOverrides", resp, err)
}

// ClearPolicyOverride removes an override, in the audit log under the
// calling principal; one that is not set is NotFound.
func (s *Server) ClearPolicyOverride(ctx context.Context, req *durablev1.ClearPolicyOverrideRequest) (*durablev1.ClearPolicyOverrideResponse, error) {
	const method = "ClearPolicyOverride"
	if err := s.check().clearPolicyOverride(req); err != nil {
		return nil, s.toStatus(ctx, method, err)
	}
	p, err := s.principal(ctx)
	if err != nil {
		return nil, err
	}
	resp, err := s.engine.ClearPolicyOverride(ctx, p.actor(), req)
	return reply(s, ctx, method, resp, err)
}
