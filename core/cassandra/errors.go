package cassandra

import (
	"errors"

	"github.com/gocql/gocql"

	"github.com/prosody-events/prosody-go/core/fault"
)

// Classify marks a gocql error with its fault class. Cassandra failures are
// transient by default (timeouts, unavailable replicas, overload, lost
// connections all heal by themselves); errors that say our statements or
// values do not fit the schema cannot heal by retrying and are terminal.
// Errors that already carry a class, and nil, are returned unchanged.
func Classify(err error) error {
	if err == nil {
		return nil
	}
	var reqErr gocql.RequestError
	if errors.As(err, &reqErr) {
		switch reqErr.Code() {
		case gocql.ErrCodeSyntax, gocql.ErrCodeInvalid, gocql.ErrCodeConfig,
			gocql.ErrCodeUnauthorized, gocql.ErrCodeCredentials, gocql.ErrCodeProtocol:
			return fault.Terminal(err)
		}
		return fault.Transient(err)
	}
	var marshalErr gocql.MarshalError
	var unmarshalErr gocql.UnmarshalError
	if errors.As(err, &marshalErr) || errors.As(err, &unmarshalErr) {
		return fault.Terminal(err)
	}
	return err
}
