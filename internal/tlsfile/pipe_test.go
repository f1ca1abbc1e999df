package tlsfile

import "net"

// netPipe is a connected pair of TCP connections on loopback: unlike
// net.Pipe, writes are buffered, as TLS handshakes expect.
func netPipe() (client, server net.Conn) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := l.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", l.Addr().String())
	if err != nil {
		panic(err)
	}
	return client, <-accepted
}
