//go:build linux && !race

package werk

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// The client's TCP connections are read and written with raw system calls: what one end writes
// the other reads, the end of the stream is io.EOF and a deadline interrupts a wait.
func TestRawIOReadsWritesAndWaits(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	peer := <-accepted
	rw, ok := newRawIO(c)
	if !ok {
		t.Fatal("a TCP connection is not read raw")
	}
	if _, ok := newRawIO(&net.UnixConn{}); ok {
		t.Fatal("a connection other than TCP is read raw")
	}

	// Far more than the socket buffers hold: the writer waits for the reader.
	sent := make([]byte, 16<<20)
	for i := range sent {
		sent[i] = byte(i * 7)
	}
	got := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(peer, int64(len(sent))))
		got <- b
	}()
	if n, err := rw.Write(sent); n != len(sent) || err != nil {
		t.Fatalf("wrote %d of %d bytes: %v", n, len(sent), err)
	}
	if b := <-got; string(b) != string(sent) {
		t.Fatalf("the peer read %d bytes, not the ones written", len(b))
	}

	if _, err := peer.Write([]byte("answer")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if n, err := io.ReadFull(rw, buf[:6]); string(buf[:n]) != "answer" || err != nil {
		t.Fatalf("read %q (%v)", buf[:n], err)
	}

	_ = c.SetDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := rw.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a read past the deadline: %v", err)
	}
	_ = c.SetDeadline(time.Time{})

	peer.Close()
	if n, err := rw.Read(buf); n != 0 || err != io.EOF {
		t.Fatalf("read %d bytes (%v) from a closed peer, want io.EOF", n, err)
	}
}
