package transport

// coordinationRoutes registers the coordination endpoints.
func (s *Server) coordinationRoutes() {}
