! Two arrays allocated by one ALLOCATE statement (gfortran inlines one
! malloc call per array) and a third by a second statement, each read
! in its own loop.
!
! Known answer: three heap objects named a, b and grid (the ALLOCATE
! statement's array names), allocated at this file's lines. See README.md.
!
! Usage: alloc [ROUNDS]   (default 40)
program alloc
  implicit none
  real(8), allocatable :: a(:), b(:), grid(:)
  integer :: n, i, r, rounds
  character(len=16) :: arg
  real(8) :: s
  rounds = 40
  if (command_argument_count() >= 1) then
     call get_command_argument(1, arg)
     read (arg, *) rounds
  end if
  n = 1048576
  allocate(a(n), b(2*n))
  allocate(grid(n))
  do i = 1, n
     a(i) = i
     grid(i) = 2 * i
  end do
  b = 1.0d0
  s = 0
  do r = 1, rounds
     do i = 1, n, 8
        s = s + a(mod(i * 61, n) + 1)
     end do
     do i = 1, 2 * n, 8
        s = s + b(mod(i * 61, 2 * n) + 1)
     end do
     do i = 1, n, 8
        s = s + grid(mod(i * 61, n) + 1)
     end do
  end do
  print '(a, f20.1)', 'sum ', s
  deallocate(a, b, grid)
end program alloc
