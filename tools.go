//go:build tools

// Package tools pins the modules Strata's packages and tests depend on, so
// that `go mod tidy` keeps them while the packages that use them are written.
package tools

import (
	_ "github.com/IBM/sarama"
	_ "github.com/google/uuid"
	_ "github.com/klauspost/compress/zstd"
	_ "github.com/pierrec/lz4/v4"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/segmentio/kafka-go"
	_ "github.com/spf13/cobra"
	_ "github.com/twmb/franz-go/pkg/kadm"
	_ "github.com/twmb/franz-go/pkg/kerr"
	_ "github.com/twmb/franz-go/pkg/kfake"
	_ "github.com/twmb/franz-go/pkg/kgo"
	_ "github.com/twmb/franz-go/pkg/kmsg"
	_ "golang.org/x/sys/unix"
	_ "pgregory.net/rapid"
)
