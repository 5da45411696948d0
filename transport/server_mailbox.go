package transport

// mailboxRoutes registers the mailbox endpoints.
func (s *Server) mailboxRoutes() {}
