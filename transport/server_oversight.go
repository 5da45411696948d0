package transport

// oversightRoutes registers the oversight endpoints.
func (s *Server) oversightRoutes() {}
