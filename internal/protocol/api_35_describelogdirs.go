package protocol

import (
	"context"

	"github.com/strata-io/strata/internal/broker"
	"golang.org/x/sys/unix"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleDescribeLogDirs (key 35, v1-4) reports each log dir with the real
// on-disk size of every partition in it, and (v4) the file system's total
// and usable bytes.
func (s *Server) handleDescribeLogDirs(_ context.Context, _ *conn, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.DescribeLogDirsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	want := func(topic string, p int32) bool {
		if req.Topics == nil {
			return true
		}
		for _, t := range req.Topics {
			if t.Topic != topic {
				continue
			}
			for _, q := range t.Partitions {
				if q == p {
					return true
				}
			}
		}
		return false
	}
	for _, dir := range s.b.LogDirs() {
		d := kmsg.NewDescribeLogDirsResponseDir()
		d.Dir = dir
		var st unix.Statfs_t
		if err := unix.Statfs(dir, &st); err == nil {
			d.TotalBytes = int64(st.Blocks) * int64(st.Bsize)
			d.UsableBytes = int64(st.Bavail) * int64(st.Bsize)
		} else {
			d.TotalBytes, d.UsableBytes = -1, -1
		}
		for _, t := range s.b.Topics() {
			dt := kmsg.NewDescribeLogDirsResponseDirTopic()
			dt.Topic = t.Name
			for _, p := range t.Partitions {
				if p.BaseDir() != dir || !want(t.Name, p.Index) {
					continue
				}
				dt.Partitions = append(dt.Partitions, logDirPartition(p))
			}
			if len(dt.Partitions) > 0 {
				d.Topics = append(d.Topics, dt)
			}
		}
		resp.Dirs = append(resp.Dirs, d)
	}
	return reply{msg: resp}, nil
}

func logDirPartition(p *broker.Partition) kmsg.DescribeLogDirsResponseDirTopicPartition {
	dp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
	dp.Partition = p.Index
	dp.Size = p.Size()
	dp.OffsetLag = 0
	return dp
}
