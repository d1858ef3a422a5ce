package protocol

import (
	"errors"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

// errCode maps an error to its Kafka error code: the wrapped kerr.Error,
// else UNKNOWN_SERVER_ERROR (-1). nil is 0.
func errCode(err error) int16 {
	if err == nil {
		return 0
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	return kerr.UnknownServerError.Code
}

// errMessage is the human message for a response's ErrorMessage field:
// the error text without the trailing kerr description.
func errMessage(err error) *string {
	if err == nil {
		return nil
	}
	msg := err.Error()
	var ke *kerr.Error
	if errors.As(err, &ke) {
		msg = strings.TrimSuffix(msg, ": "+ke.Error())
	}
	return &msg
}
