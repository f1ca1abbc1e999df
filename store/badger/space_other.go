//go:build !linux && !darwin

package badger

// SpaceOf fails with ErrSpaceUnknown: this platform has no statfs here.
func SpaceOf(string) (Space, error) { return Space{}, ErrSpaceUnknown }
